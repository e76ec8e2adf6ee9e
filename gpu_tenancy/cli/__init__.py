"""`gpu-tenancy <command>`: the day-two command lines, listed in commands.py, run by main.py through base_command.py."""
