# The AWS CLI's own command tables (awscli, installed by .ci/install-tools as
# TFREG_AWS): is each command line the README writes one it accepts? Run by
# tests/readme (clis.rs) with the Python of the AWS CLI's venv.
#
# stdin: a JSON list of word lists, each after `aws`. stdout: a JSON list,
# one entry per command: null when the command and every --flag exist,
# else what is wrong. A --flag may be the operation's or a global one
# (--region, --query, --output, --endpoint-url, ...).
import json
import sys

from awscli.clidriver import create_clidriver


def subcommands(command):
    table = getattr(command, "subcommand_table", None)
    if table is None and hasattr(command, "_get_command_table"):
        table = command._get_command_table()
    return table or {}


def check(driver, words):
    table = driver._get_command_table()
    path, command = [], None
    rest = list(words)
    while rest and not rest[0].startswith("-") and (command is None or subcommands(command)):
        name = rest.pop(0)
        here = table if command is None else subcommands(command)
        if name not in here:
            return "`aws %s`: no command %s" % (" ".join(path), name)
        path.append(name)
        command = here[name]
    if command is None:
        return "no command"
    # A service alone (`aws lambda`) is no command; a customization with
    # subcommands may run alone (`aws configure`).
    if subcommands(command) and type(command).__name__ == "ServiceCommand":
        return "`aws %s` needs one of its operations" % " ".join(path)
    known = set(command.arg_table) | set(driver._get_argument_table())
    for word in rest:
        if word.startswith("--"):
            flag = word[2:].split("=", 1)[0]
            if flag not in known:
                return "`aws %s` has no --%s" % (" ".join(path), flag)
    return None


def main():
    driver = create_clidriver()
    lines = json.load(sys.stdin)
    json.dump([check(driver, words) for words in lines], sys.stdout)


main()
