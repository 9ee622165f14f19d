"""The roboscale runtime: supervised lightweight robot nodes with OTP semantics.

Import what you need from the submodules (`runtime.node`, `runtime.supervisor`,
...); this package itself imports nothing so that a process child can load
`runtime.child` without pulling in asyncio machinery.
"""
