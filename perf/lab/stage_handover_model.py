# A model of the stream side of the staged path (coll/dev_staged.cc) on a GPU,
# in CuPy: what 8-byte copies in and out cost per operation, and what handing
# each operation to the host with cudaLaunchHostFunc adds (also with a spin
# kernel that waits for a host-mapped flag, set by the host function or by
# another thread it wakes). docs/gpu-baseline.md, "Device buffers between
# hosts (staged)", has its numbers. Run: python perf/lab/stage_handover_model.py
import time, threading
import numpy as np, cupy as cp
N = 200
s = cp.cuda.Stream(non_blocking=True)
d = cp.zeros(2, cp.float32)
h = cp.cuda.alloc_pinned_memory(64)
hflag = cp.cuda.alloc_pinned_memory(64)
flag_np = np.frombuffer(hflag, np.uint32, 16)
dptr = hflag.ptr  # UVA: pinned memory is device-addressable
spin = cp.RawKernel(r'''
extern "C" __global__ void spin(volatile unsigned* f, unsigned want) { while (f[0] < want) __nanosleep(200); }
''', 'spin')
def run(label, hostfunc, waitk, thread):
    ev = threading.Event(); q = []
    stop = [False]
    def worker():
        while not stop[0]:
            if ev.wait(0.5):
                ev.clear()
                while q:
                    q.pop(); flag_np[0] += 1
    t = threading.Thread(target=worker); t.start()
    flag_np[0] = 0
    def cb(arg):
        if thread: q.append(1); ev.set()
        else: flag_np[0] += 1
    with s:
        for warm in (True, False):
            n = 20 if warm else N
            t0 = time.perf_counter()
            base = int(flag_np[0])
            for i in range(n):
                cp.cuda.runtime.memcpyAsync(h.ptr, d.data.ptr, 8, cp.cuda.runtime.memcpyDeviceToHost, s.ptr)
                if hostfunc: s.launch_host_func(cb, None)
                if waitk: spin((1,), (1,), (np.uint64(dptr), np.uint32(base + i + 1)))
                cp.cuda.runtime.memcpyAsync(d.data.ptr, h.ptr, 8, cp.cuda.runtime.memcpyHostToDevice, s.ptr)
            s.synchronize()
            dt = (time.perf_counter() - t0) / n * 1e6
    stop[0] = True; t.join()
    print(f"{label:50s} {dt:8.1f} us per iteration")
run("copies only", False, False, False)
run("copies + host func", True, False, False)
run("copies + host func sets flag + spin kernel", True, True, False)
run("copies + host func -> thread sets flag + spin kernel", True, True, True)
