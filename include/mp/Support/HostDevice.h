//===- HostDevice.h - code for both the CPU and CUDA kernels ----*- C++ -*-===//
//
// MP_HOST_DEVICE marks inline functions the CUDA kernels call on the device
// and the CPU code (kernels, tests) calls on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_HOSTDEVICE_H
#define MP_SUPPORT_HOSTDEVICE_H

// MP_UNROLL asks nvcc to unroll the loop that follows (GCC would warn about
// an unknown pragma).
#ifdef __CUDACC__
#define MP_HOST_DEVICE __host__ __device__
#define MP_UNROLL _Pragma("unroll")
#else
#define MP_HOST_DEVICE
#define MP_UNROLL
#endif

#endif // MP_SUPPORT_HOSTDEVICE_H
