"""nccl-tests-style performance drivers: ``python -m accl.perf <collective> [flags]``.

Modules, one job each:
    options    command line (nccl-tests' flags) and the size sweep
    launcher   starts N local ranks as subprocesses, with a deadline
    rendezvous who this process is (rank, nranks, unique id) from the environment
    collectives the benchmarked operations (buffer sizes, bandwidth factors, the
               call, the expected result), as nccl-tests defines them
    data       exact input patterns and reductions, for the #wrong check
    devices    the "Using devices" lines, gathered from every rank
    binding    --bind-to: each local rank on its own CPU, as mpirun binds
    table      nccl-tests' table formatting
    worker     one rank: init, sweep, time, check; rank 0 prints
    compare    --compare: runs the peer libraries before ACCL's ranks
    peers      one rank of a peer library's sweep
    peer_mpi, peer_gloo  each collective as OpenMPI (mpi4py) and Gloo call it
"""
