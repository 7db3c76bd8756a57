from openforgerl.envs.claw.services.server import main

if __name__ == "__main__":
    main()
