# an RPC call's round trip on a plain socket without the interpreter's lock
# (src/walship/rpc/_exchange.c), used by walship.rpc.wire.exchange_frame.

def exchange(fd: int, parts: tuple[bytes, ...], timeout: float, max_frame: int, /) -> bytes | int | None: ...
