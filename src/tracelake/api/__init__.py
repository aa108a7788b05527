"""What a source sees of the kernel: the types it hands over (TableInput, Derived, Source,
report Section) and the helpers its pure transforms use. Sources import from here and from
`tracelake.io` (parsing), never from `run`, `delta` or `app`."""
