from openforgerl.envs.claw.verify.run import main

if __name__ == "__main__":
    raise SystemExit(main())
