"""LeRobot's chunking of a payload into Observation messages (transport/utils.py's send_bytes_in_chunks), for the
tests that speak its gRPC protocol; the stubs (lerobot_services_pb2) must be importable first."""
CHUNK = 2 * 1024 * 1024   # LeRobot's CHUNK_SIZE


def chunks(payload, chunk=CHUNK):
    """END when the rest fits in one chunk, else BEGIN first, then MIDDLE."""
    import lerobot_services_pb2 as pb
    sent, n = 0, len(payload)
    while sent < n:
        st = pb.TRANSFER_MIDDLE
        if sent + chunk >= n:
            st = pb.TRANSFER_END
        elif sent == 0:
            st = pb.TRANSFER_BEGIN
        k = min(chunk, n - sent)
        yield pb.Observation(transfer_state=st, data=payload[sent:sent + k])
        sent += k
