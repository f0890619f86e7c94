# CUDA is optional: the CPU build is complete. MO_WITH_CUDA defaults to ON when nvcc is found.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_mo_cuda_default ON)
else()
  set(_mo_cuda_default OFF)
endif()
option(MO_WITH_CUDA "Build the CUDA backend (needs nvcc and the CUDA Toolkit)" ${_mo_cuda_default})

if(MO_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "MO_WITH_CUDA=ON but no CUDA compiler was found: install the CUDA Toolkit or pass -DMO_WITH_CUDA=OFF")
  endif()
  # Architectures we ship SASS for, each a GPU generation our users run:
  #   80 = A100 (Ampere datacenter), 86 = RTX 3090 / A10 (Ampere consumer),
  #   89 = RTX 4090 / L4 / L40S (Ada), 90 = H100 / H200 (Hopper).
  # Override with -DCMAKE_CUDA_ARCHITECTURES=... for a single-GPU build that compiles faster.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 86 89 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 dialect for nvcc; kernels need only C++17
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)

  # Every kernels/**/*.cu goes in, and the Backend that wraps them (src/engine/backend/*.cu, beside the CPU
  # backend); new files are picked up when CMake re-runs.
  file(GLOB_RECURSE MO_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.cu ${PROJECT_SOURCE_DIR}/src/engine/backend/*.cu)
  # A plugin (libmo_cuda.so beside the binaries) that the core library dlopens on first use, so CPU runs
  # never map the CUDA libraries; it links nothing of the core library (mo/core/cuda_plugin.h).
  add_library(mo_cuda MODULE ${MO_CUDA_SOURCES})
  # Only the headers of the modules the kernels may use (cmake/Modules.cmake makes these views).
  target_include_directories(mo_cuda PRIVATE kernels ${PROJECT_BINARY_DIR}/include-views/core
                             ${PROJECT_BINARY_DIR}/include-views/formats ${PROJECT_BINARY_DIR}/include-views/engine)
  target_link_libraries(mo_cuda PRIVATE CUDA::cudart CUDA::cublas CUDA::cusolver fmt::fmt)
  set_target_properties(mo_cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  # Line info for profilers (nsys / ncu) at no run-time cost; fast math stays off (the op tests compare to the CPU).
  target_compile_options(mo_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>)
  set_target_properties(mo_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
  message(STATUS "model-optimizer: CUDA backend ON (archs ${CMAKE_CUDA_ARCHITECTURES}, toolkit ${CUDAToolkit_VERSION})")
else()
  message(STATUS "model-optimizer: CUDA backend OFF (CPU build)")
endif()
