// Lab (built by hand, not by CMake): the library's own direct kernel (collKernel) timed the
// way direct_lab.cu times its loops: 2 ranks as 2 streams of one process,
// 20 calls in a CUDA graph, best of 3 replays (build: nvcc -O3 -arch=sm_90
// -std=c++17 -Isrc -Iinclude perf/lab/lib_lab.cu).
#include <cstdio>
#include <cstdlib>

#include "device/dev_colls.cuh"

using namespace accl;

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e = (x);                                                        \
    if (e != cudaSuccess) {                                                     \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

template <DevColl C>
void run(const char* name, size_t bytes, int sms) {
  const int n = 2, iters = 20;
  const size_t count = C == DevColl::AllGather ? bytes / 4 / n : bytes / 4;  // per rank for allgather
  float* in[2];
  float* out[2];
  for (int r = 0; r < n; ++r) {
    CK(cudaMalloc(&in[r], bytes));
    CK(cudaMalloc(&out[r], bytes));
    CK(cudaMemset(in[r], 0, bytes));
  }
  DevDirectSlot* slots;
  CK(cudaMalloc(&slots, n * sizeof(DevDirectSlot)));
  CK(cudaMemset(slots, 0, n * sizeof(DevDirectSlot)));
  DevStatus* status;
  CK(cudaMalloc(&status, n * sizeof(DevStatus)));
  CK(cudaMemset(status, 0, n * sizeof(DevStatus)));
  DevFifoCtrl* ctrl;
  CK(cudaMalloc(&ctrl, sizeof(DevFifoCtrl)));
  CK(cudaMemset(ctrl, 0, sizeof(DevFifoCtrl)));
  DevChan hc{};
  hc.ctrl = ctrl;
  DevChan* ch;
  CK(cudaMalloc(&ch, sizeof(DevChan)));
  CK(cudaMemcpy(ch, &hc, sizeof(hc), cudaMemcpyHostToDevice));
  cudaStream_t s[2];
  for (auto& x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, fork, join;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  auto launch = [&]() {
    CK(cudaEventRecord(fork, s[0]));
    CK(cudaStreamWaitEvent(s[1], fork));
    for (int r = 0; r < n; ++r) {
      DevCollWork w{};
      w.ctx.status = status + r;
      w.ctx.rank = r;
      w.ctx.nranks = n;
      w.coll = C;
      w.nChannels = sms / n;
      w.nChannelsConn = 1;
      w.send = in[r];
      w.recv = out[r];
      w.count = count;
      w.sendCh = w.recvCh = ch;
      for (int k = 0; k < n; ++k) w.slots[k] = slots + k;
      w.sendWin = w.recvWin = -1;
      collKernel<C, float, DevOp::Sum><<<sms / n, kThreads, 0, s[r]>>>(w);
    }
    CK(cudaEventRecord(join, s[1]));
    CK(cudaStreamWaitEvent(s[0], join));
    CK(cudaGetLastError());
  };
  launch();
  CK(cudaStreamSynchronize(s[0]));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
  for (int i = 0; i < iters; ++i) launch();
  CK(cudaStreamEndCapture(s[0], &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s[0]));
  CK(cudaStreamSynchronize(s[0]));
  float best = 1e30f;
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaEventRecord(e0, s[0]));
    CK(cudaGraphLaunch(ge, s[0]));
    CK(cudaEventRecord(e1, s[0]));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    best = ms < best ? ms : best;
  }
  DevStatus hs[2];
  CK(cudaMemcpy(hs, status, sizeof(hs), cudaMemcpyDeviceToHost));
  const double us = best * 1000 / iters;
  const double traffic = C == DevColl::AllReduce ? 4.0 * bytes : 3.0 * bytes;
  printf("lib %-10s %10zu B: %8.1f us  %6.0f GB/s  (%.1f%% of 4.3 TB/s)  status %d %d\n", name, bytes, us,
         traffic / us / 1e3, traffic / us / 4.3e4, hs[0].reason, hs[1].reason);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  for (int r = 0; r < n; ++r) {
    CK(cudaFree(in[r]));
    CK(cudaFree(out[r]));
  }
  CK(cudaFree(slots));
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (size_t b : {size_t(1) << 20, size_t(64) << 20, size_t(256) << 20}) run<DevColl::AllReduce>("allreduce", b, sms);
  for (size_t b : {size_t(1) << 20, size_t(64) << 20, size_t(256) << 20}) run<DevColl::AllGather>("allgather", b, sms);
  for (size_t b : {size_t(64) << 20, size_t(256) << 20}) run<DevColl::Broadcast>("broadcast", b, sms);
  return 0;
}
