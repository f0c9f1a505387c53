# The GPUs the kernels are built for. Each entry of IRIS_CUDA_GENCODE is sm_XX (machine code
# for that architecture, run as is) or compute_XX (PTX, which the driver compiles when it
# loads the library on a GPU with no machine code of its own: newer chips). The default
# covers Turing (T4, sm_75), Ampere (A100 sm_80; RTX 30xx and A10, sm_86, run the sm_80 machine
# code: a GPU runs the machine code of an older minor version of its major one, and sm_86 has
# no instruction the kernels would take that sm_80 lacks, kernels/arch.cuh), Ada (RTX 40xx, L4,
# sm_89: its E4M3 conversion) and Hopper (sm_90a), plus compute_90 PTX for anything newer. Kernels choose their paths at
# run time from the architecture the driver loaded (kernels/arch.cuh, DeviceInfo::kernel_arch).
# A narrower list builds faster: "sm_90a" for one H100; "compute_75;compute_80" is the
# PTX-only build the GPU runs use to prove the Turing and Ampere paths on a Hopper card.
# "native" builds for the GPUs of this machine (nvidia-smi's compute capabilities: 9.0 -> sm_90a,
# 8.6 -> sm_86, ...), the fastest build for a machine that runs its own kernels; without a GPU
# it falls back to the full list.
set(IRIS_CUDA_GENCODE_RELEASE "sm_75;sm_80;sm_89;sm_90a;compute_90")
set(IRIS_CUDA_GENCODE "${IRIS_CUDA_GENCODE_RELEASE}" CACHE STRING
    "GPU targets of the kernels: sm_XX (machine code) and compute_XX (PTX) entries, or native, or release")
# "release" names the default list (scripts/run.sh asks for it by name in a build folder whose
# cache may hold another).
set(IRIS_CUDA_GENCODE_LIST "${IRIS_CUDA_GENCODE}")
if(IRIS_CUDA_GENCODE STREQUAL "release")
  set(IRIS_CUDA_GENCODE_LIST "${IRIS_CUDA_GENCODE_RELEASE}")
endif()
if(IRIS_CUDA_GENCODE STREQUAL "native")
  set(IRIS_CUDA_GENCODE_LIST "")
  execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                  OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0)
    string(REPLACE "\n" ";" caps "${caps}")
    foreach(cap IN LISTS caps)
      if(cap MATCHES "^([0-9]+)\\.([0-9]+)$")
        set(arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
        if(arch STREQUAL "90")
          set(arch "90a")  # Hopper's arch-specific instructions
        endif()
        list(APPEND IRIS_CUDA_GENCODE_LIST "sm_${arch}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES IRIS_CUDA_GENCODE_LIST)
  endif()
  if(NOT IRIS_CUDA_GENCODE_LIST)
    message(STATUS "iris: IRIS_CUDA_GENCODE=native found no GPU here (nvidia-smi); building the full list")
    set(IRIS_CUDA_GENCODE_LIST "${IRIS_CUDA_GENCODE_RELEASE}")
  endif()
endif()
set(IRIS_CUDA_GENCODE_FLAGS "")
foreach(target IN LISTS IRIS_CUDA_GENCODE_LIST)
  if(target MATCHES "^sm_([0-9]+a?)$")
    list(APPEND IRIS_CUDA_GENCODE_FLAGS "-gencode=arch=compute_${CMAKE_MATCH_1},code=sm_${CMAKE_MATCH_1}")
  elseif(target MATCHES "^compute_([0-9]+a?)$")
    list(APPEND IRIS_CUDA_GENCODE_FLAGS "-gencode=arch=compute_${CMAKE_MATCH_1},code=compute_${CMAKE_MATCH_1}")
  else()
    message(FATAL_ERROR "IRIS_CUDA_GENCODE: '${target}' is neither sm_XX nor compute_XX")
  endif()
  if(CMAKE_MATCH_1 MATCHES "^([0-9]+)" AND CMAKE_MATCH_1 LESS 75)
    message(FATAL_ERROR "IRIS_CUDA_GENCODE: '${target}' is older than the oldest supported GPU (sm_75)")
  endif()
endforeach()
if(NOT IRIS_CUDA_GENCODE_FLAGS)
  message(FATAL_ERROR "IRIS_CUDA_GENCODE is empty")
endif()
# nvcc compiles the targets of one file one after another unless told otherwise; --threads=0
# compiles them in parallel. With the six release targets on 16 cores, the whole build went
# from more than 354 s (stopped by an unrelated error, its kernels done) to 240 s
# (docs/BENCHMARKS.md, "The first build").
list(LENGTH IRIS_CUDA_GENCODE_LIST IRIS_CUDA_TARGET_COUNT)
if(IRIS_CUDA_TARGET_COUNT GREATER 1)
  list(APPEND IRIS_CUDA_GENCODE_FLAGS "--threads=0")
endif()
message(STATUS "iris: CUDA targets ${IRIS_CUDA_GENCODE_LIST}")
