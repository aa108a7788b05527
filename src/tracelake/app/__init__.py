"""What a user runs: the command line, the demo, the HTML report and the read-only query guard."""
