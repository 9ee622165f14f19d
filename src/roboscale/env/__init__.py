"""The environment of a trial: host facts now; emulated hosts, links and CPU limits later."""
