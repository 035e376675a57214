//===- HostDevice.h - code for both the CPU and CUDA kernels ----*- C++ -*-===//
//
// MP_HOST_DEVICE marks inline functions the CUDA kernels call on the device
// and the CPU code (kernels, tests) calls on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_HOSTDEVICE_H
#define MP_SUPPORT_HOSTDEVICE_H

#ifdef __CUDACC__
#define MP_HOST_DEVICE __host__ __device__
#else
#define MP_HOST_DEVICE
#endif

#endif // MP_SUPPORT_HOSTDEVICE_H
