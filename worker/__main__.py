from worker.cli.main import main

if __name__ == "__main__":  # an engine process (spawn) imports this module as __mp_main__
    raise SystemExit(main())
