"""python3 -m unetlab COMMAND BUILD_DIR [OPTIONS] (PYTHONPATH=tools/lab; tools/lab.sh runs it)."""
import importlib
import sys

COMMANDS = ("demo", "soak", "experiments", "bench")


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python3 -m unetlab {{{'|'.join(COMMANDS)}}} BUILD_DIR [OPTIONS]", file=sys.stderr)
        return 2
    return importlib.import_module(f"unetlab.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
