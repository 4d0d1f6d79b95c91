# The CUDA launcher of graphopt's ahead-of-time Triton kernels, for include() from
# graphopt/ort/CMakeLists.txt. Defines the static, position-independent library
# graphopt_cuda_launch when cuda.h and Triton are available; otherwise defines nothing and says why
# (GRAPHOPT_CUDA_LAUNCH_FOUND tells the including project which happened).
#
# Inputs (all optional):
#   GRAPHOPT_CUDA_INCLUDE_DIR  directory holding cuda.h (else the CUDA toolkit's, if CMake finds one)
#   Python_EXECUTABLE          the interpreter that runs the generator (else found here)
#   GRAPHOPT_CUDA_ARCHS        compute capabilities to build cubins for, e.g. "80,86,89,90"
# Nothing links against libcuda: the launcher opens libcuda.so.1 itself on first use.

set(GRAPHOPT_CUDA_LAUNCH_FOUND OFF)
set(_graphopt_cuda_dir "${CMAKE_CURRENT_LIST_DIR}")
get_filename_component(_graphopt_repo_root "${_graphopt_cuda_dir}/../../.." ABSOLUTE)

# cuda.h: an explicit directory first, then the toolkit's headers (no toolkit libraries are used).
if(NOT GRAPHOPT_CUDA_INCLUDE_DIR)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(GRAPHOPT_CUDA_INCLUDE_DIR "${CUDAToolkit_INCLUDE_DIRS}")
  endif()
endif()
find_path(_graphopt_cuda_h cuda.h HINTS ${GRAPHOPT_CUDA_INCLUDE_DIR} NO_CACHE)

if(NOT Python_EXECUTABLE)
  find_package(Python COMPONENTS Interpreter QUIET)
endif()
set(_graphopt_triton_ok OFF)
if(Python_EXECUTABLE)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import triton"
    RESULT_VARIABLE _graphopt_triton_rc OUTPUT_QUIET ERROR_QUIET)
  if(_graphopt_triton_rc EQUAL 0)
    set(_graphopt_triton_ok ON)
  endif()
endif()

if(NOT _graphopt_cuda_h)
  message(STATUS "graphopt: cuda.h not found (set GRAPHOPT_CUDA_INCLUDE_DIR); building without CUDA kernels")
elseif(NOT _graphopt_triton_ok)
  message(STATUS "graphopt: Triton not importable by '${Python_EXECUTABLE}'; building without CUDA kernels")
else()
  set(GRAPHOPT_CUDA_ARCHS "80,86,89,90" CACHE STRING "Compute capabilities of the AOT cubins (PTX is added)")
  set(_graphopt_gen_dir "${CMAKE_BINARY_DIR}/gen")
  set(_graphopt_images "${_graphopt_gen_dir}/kernel_images.cc")
  # Everything the ahead-of-time build reads: the kernels, their parts and launch rules (the tiers are
  # the table's data), the specs.
  file(GLOB _graphopt_kernel_sources CONFIGURE_DEPENDS "${_graphopt_repo_root}/graphopt/kernels/*.py"
       "${_graphopt_repo_root}/graphopt/fused/*/*kernel*.py" "${_graphopt_repo_root}/graphopt/fused/*/kernel_parts.py"
       "${_graphopt_repo_root}/graphopt/fused/*/launch_rule.py" "${_graphopt_repo_root}/graphopt/fused/*/spec.py"
       "${_graphopt_repo_root}/graphopt/fused/broadcast_rows.py")
  file(GLOB _graphopt_op_launches CONFIGURE_DEPENDS "${_graphopt_repo_root}/graphopt/fused/*/cuda_launch.cc")
  add_custom_command(
    OUTPUT "${_graphopt_images}"
    COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${_graphopt_repo_root}"
            "${Python_EXECUTABLE}" -m graphopt.kernels.aot --out "${_graphopt_gen_dir}"
            --archs "${GRAPHOPT_CUDA_ARCHS}"
    DEPENDS ${_graphopt_kernel_sources}
    WORKING_DIRECTORY "${_graphopt_repo_root}"
    COMMENT "graphopt: compiling the Triton kernels ahead of time (sm ${GRAPHOPT_CUDA_ARCHS} + PTX)"
    VERBATIM)

  add_library(graphopt_cuda_launch STATIC
    "${_graphopt_cuda_dir}/launch.cc"
    "${_graphopt_cuda_dir}/driver_api.cc"
    "${_graphopt_cuda_dir}/kernel_loader.cc"
    ${_graphopt_op_launches}
    "${_graphopt_images}")
  # The op codes and enums come from the specs (fused_enums.h).
  include("${_graphopt_repo_root}/graphopt/fused/codegen.cmake")
  add_dependencies(graphopt_cuda_launch graphopt_generated)
  set_target_properties(graphopt_cuda_launch PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(graphopt_cuda_launch PUBLIC cxx_std_17)
  target_include_directories(graphopt_cuda_launch
    PUBLIC "${_graphopt_cuda_dir}" "${GRAPHOPT_GEN_DIR}" "${GRAPHOPT_FUSED_DIR}"
           "${_graphopt_repo_root}/graphopt/ort/src"
    PRIVATE "${_graphopt_cuda_h}")
  target_link_libraries(graphopt_cuda_launch PRIVATE ${CMAKE_DL_LIBS})
  set(GRAPHOPT_CUDA_LAUNCH_FOUND ON)
  message(STATUS "graphopt: CUDA kernels for sm ${GRAPHOPT_CUDA_ARCHS} + PTX (cuda.h in ${_graphopt_cuda_h})")
endif()
