"""nccl-tests-style performance drivers: ``python -m accl.perf allreduce [flags]``.

Modules, one job each:
    options    command line (nccl-tests' flags) and the size sweep
    launcher   starts N local ranks as subprocesses, with a deadline
    rendezvous who this process is (rank, nranks, unique id) from the environment
    collectives the benchmarked operations (bus bandwidth factor, how to run one)
    data       exact input patterns and expected results, for the #wrong check
    devices    the "Using devices" lines, gathered from every rank
    binding    --bind-to: each local rank on its own CPU, as mpirun binds
    table      nccl-tests' table formatting
    worker     one rank: init, sweep, time, check; rank 0 prints
"""
