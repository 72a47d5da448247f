import struct

import pytest

from tierlog.broker.txn.log_codec import (
    STATE_BY_NAME,
    TxnLogCodecError,
    TxnLogValue,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_key_is_version_0_and_the_id_as_a_string():
    assert encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_key(encode_key("tx-ü")) == "tx-ü"


def test_value_v0_layout_is_kafkas():
    value = TxnLogValue(7, 3, 60_000, TxnState.ONGOING, (("a", 0), ("a", 2), ("b", 1)), 20, 10)
    data = encode_value(value)
    head = struct.unpack_from(">hqhib", data)
    assert head == (0, 7, 3, 60_000, 1)
    position = struct.calcsize(">hqhib")
    assert struct.unpack_from(">i", data, position) == (2,)  # two topics
    assert data[-16:] == struct.pack(">qq", 20, 10)
    assert decode_value(data) == value


def test_a_null_partition_array_reads_as_no_partitions():
    data = (
        struct.pack(">hqhib", 0, 1, 0, 1000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 5, -1)
    )
    assert decode_value(data).partitions == ()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        struct.pack(">hqhib", 1, 1, 0, 1000, 0),  # v1 (flexible) is not read here
        struct.pack(">hqhib", 0, 1, 0, 1000, 42) + struct.pack(">i", 0) + bytes(16),
        struct.pack(">hqhib", 0, 1, 0, 1000, 0) + struct.pack(">i", 1000) + bytes(16),
        encode_value(TxnLogValue(1, 0, 1, TxnState.EMPTY, (), 0, 0)) + b"x",
    ],
)
def test_bad_values_raise_the_codec_error(data):
    with pytest.raises(TxnLogCodecError):
        decode_value(data)


def test_state_names_are_the_ones_kafka_tools_print():
    assert TxnState.PREPARE_COMMIT.display_name == "PrepareCommit"
    assert STATE_BY_NAME["CompleteAbort"] is TxnState.COMPLETE_ABORT
    assert len(STATE_BY_NAME) == len(TxnState)
