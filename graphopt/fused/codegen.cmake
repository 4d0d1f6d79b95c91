# The C++ derived from the fused ops' specs (graphopt.fused.cpp_codegen), for include() from the ONNX
# Runtime library's CMakeLists.txt and from cuda.cmake: defines the target graphopt_generated, the
# directory GRAPHOPT_GEN_DIR holding fused_enums.h, fused_ops.h and fused_ops.cc, and GRAPHOPT_FUSED_DIR
# (the op folders, an include root: "norm_act/ort_kernel.h"). Needs only a Python interpreter: the
# generator imports the specs, which import nothing outside the standard library.
if(TARGET graphopt_generated)
  return()
endif()
get_filename_component(GRAPHOPT_FUSED_DIR "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
get_filename_component(_graphopt_root "${GRAPHOPT_FUSED_DIR}/../.." ABSOLUTE)
set(GRAPHOPT_GEN_DIR "${CMAKE_BINARY_DIR}/gen")
if(NOT Python_EXECUTABLE)
  find_package(Python COMPONENTS Interpreter REQUIRED)
endif()
file(GLOB _graphopt_specs CONFIGURE_DEPENDS "${GRAPHOPT_FUSED_DIR}/*.py" "${GRAPHOPT_FUSED_DIR}/*/spec.py")
set(_graphopt_generated
    "${GRAPHOPT_GEN_DIR}/fused_enums.h" "${GRAPHOPT_GEN_DIR}/fused_ops.h" "${GRAPHOPT_GEN_DIR}/fused_ops.cc")
add_custom_command(
  OUTPUT ${_graphopt_generated}
  COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${_graphopt_root}"
          "${Python_EXECUTABLE}" -m graphopt.fused.cpp_codegen --out "${GRAPHOPT_GEN_DIR}"
  DEPENDS ${_graphopt_specs}
  WORKING_DIRECTORY "${_graphopt_root}"
  COMMENT "graphopt: generating the fused ops' C++ from their specs"
  VERBATIM)
add_custom_target(graphopt_generated DEPENDS ${_graphopt_generated})
