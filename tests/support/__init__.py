"""What the tests share: paths and commands, real peers started and stopped, clients, and
small servers for what the real peers never do."""
