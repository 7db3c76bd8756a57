from openforgerl.envs.services.server import main

if __name__ == "__main__":
    main()
