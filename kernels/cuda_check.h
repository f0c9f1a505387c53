// Every CUDA call and launch is checked; failures become Status errors naming the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"

#define IRIS_CUDA_TRY(call)                                                                          \
  do {                                                                                               \
    cudaError_t iris_cuda_err_ = (call);                                                             \
    if (iris_cuda_err_ != cudaSuccess)                                                               \
      return ::iris::Status::error(::iris::ErrorKind::kDevice, std::string(#call) + ": " +               \
                                                               cudaGetErrorString(iris_cuda_err_)); \
  } while (0)

// After a launch: configuration errors now, execution errors at the next synchronisation.
#define IRIS_CUDA_LAUNCHED(what) IRIS_CUDA_TRY(cudaGetLastError())
