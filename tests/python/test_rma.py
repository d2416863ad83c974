"""Windows and one-sided operations through the Python API, ranks as threads
(host mode): every rank puts into every rank's window (its own included), a
put of several FIFO slots, bare signals, errors, and deregistration; NumPy
arrays are the reference."""
import threading

import numpy as np
import pytest
from test_collectives import run_ranks

import accl


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_every_rank_puts_into_every_window(nranks):
    block = 1000

    def body(comm):
        me, n = comm.rank, comm.size
        win_arr = np.full(n * block, -1.0, dtype=np.float64)
        big_in = np.zeros(3 * 1024 * 1024 + 5, dtype=np.uint8)  # several slots and an odd tail
        with comm.register_window(win_arr) as win, comm.register_window(big_in, symmetric=False) as big:
            mine = np.arange(block, dtype=np.float64) + 1000 * me
            for k in range(n):  # start with a different target on every rank
                comm.put_signal(mine, (me + k) % n, win, offset=me * block * 8)
            nxt, prv = (me + 1) % n, (me - 1) % n
            comm.put_signal(np.full(big_in.size, me + 1, dtype=np.uint8), nxt, big)
            waits = {p: 1 for p in range(n)}
            waits[prv] += 1
            comm.wait_signal(waits)
            want = np.concatenate([np.arange(block, dtype=np.float64) + 1000 * q for q in range(n)])
            np.testing.assert_array_equal(win_arr, want)
            assert (big_in == prv + 1).all()
            comm.signal(nxt)
            comm.signal(nxt)
            comm.wait_signal([(prv, 2)])
        return True

    assert run_ranks(nranks, body) == [True] * nranks


@pytest.mark.timeout(120)
def test_errors_are_clear():
    # One rank at a time: an error's message carries the process's last WARN,
    # which a concurrent rank thread could overwrite.
    turn = threading.Barrier(2)

    def body(comm):
        arr = np.zeros(16, dtype=np.float32)
        with comm.register_window(arr) as win:
            if comm.rank == 1:
                turn.wait()
            with pytest.raises(accl.InvalidArgumentError, match="do not fit"):
                comm.put_signal(np.ones(4, np.float32), 1 - comm.rank, win, offset=60)
            with pytest.raises(accl.InvalidArgumentError, match="peer 2 is outside"):
                comm.signal(2)
            with pytest.raises(accl.InvalidArgumentError, match="opCnt"):
                comm.wait_signal({0: -1})
            with pytest.raises(ValueError, match="registered Window"):
                comm.put_signal(np.ones(1, np.float32), 0, object())
            with pytest.raises(ValueError, match="writeable C-contiguous"):
                comm.register_window(np.zeros((4, 4))[:, 1])
            if comm.rank == 0:
                turn.wait()
            comm.put_signal(np.full(4, comm.rank + 1, np.float32), 1 - comm.rank, win, offset=48)
            comm.wait_signal({1 - comm.rank: 1})
            assert (arr[12:] == 2 - comm.rank).all() and (arr[:12] == 0).all()
        return True

    assert run_ranks(2, body) == [True, True]


@pytest.mark.timeout(120)
def test_a_dropped_window_stays_alive_until_deregistered():
    # The caller keeps no reference to the Window; the communicator does, so the
    # peer's put lands in live memory and the data is readable through it.
    import gc

    def body(comm):
        comm.register_window(np.zeros(8, np.int64))  # dropped at once
        gc.collect()
        (win,) = tuple(comm._windows)
        comm.put_signal(np.full(8, comm.rank + 7, np.int64), 1 - comm.rank, win)
        comm.wait_signal({1 - comm.rank: 1})
        assert (win.array == (1 - comm.rank) + 7).all()
        win.deregister()
        assert not comm._windows and win.array is None
        return True

    assert run_ranks(2, body) == [True, True]


@pytest.mark.timeout(120)
def test_a_raising_block_leaves_the_window_to_the_communicator():
    # Leaving a `with` block by an exception does not start the collective
    # deregistration (another rank may never get there); the window stays
    # registered until the communicator goes, and nothing hangs.
    def body(comm):
        with pytest.raises(RuntimeError, match="boom"):
            with comm.register_window(np.zeros(4, np.int32)) as win:
                if comm.rank == 1:
                    comm.signal(0)
                raise RuntimeError("boom")
        assert win.registered and win in comm._windows
        if comm.rank == 0:
            comm.wait_signal({1: 1})  # the communicator still works
        return win

    wins = run_ranks(2, body)  # destroys both communicators
    assert all(w.registered for w in wins)
