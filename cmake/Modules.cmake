# One static library per module under src/, with its allowed dependencies declared once (MO_MODULES
# below). Each library sees only its own headers and those of the modules it links: its include path
# is a folder of links (build/include-views/<module>/mo/<module> -> include/mo/<module>), so an include
# of a module it does not depend on fails to compile. docs/architecture.md is checked against this
# list (scripts/check-layers.py, ctest "layers").

# mo_module(<name> [DEPS <modules>...] [LIBS <targets>...])
function(mo_module name)
  cmake_parse_arguments(M "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(mo_${name} STATIC ${srcs} ${M_UNPARSED_ARGUMENTS})
  set(view ${PROJECT_BINARY_DIR}/include-views/${name})
  if(EXISTS ${PROJECT_SOURCE_DIR}/include/mo/${name})
    file(MAKE_DIRECTORY ${view}/mo)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/mo/${name} ${view}/mo/${name} SYMBOLIC)
    target_include_directories(mo_${name} PUBLIC ${view})
  endif()
  list(TRANSFORM M_DEPS PREPEND mo_ OUTPUT_VARIABLE dep_targets)
  target_link_libraries(mo_${name} PUBLIC ${dep_targets} ${M_LIBS})
  set_property(GLOBAL APPEND PROPERTY MO_MODULE_LIST ${name})
  set_property(GLOBAL PROPERTY MO_MODULE_DEPS_${name} ${M_DEPS})
endfunction()

# The layers, bottom first. A module may use the ones it lists (and what they list).
mo_module(core ${MO_BUILD_INFO_CPP} LIBS fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
mo_module(formats DEPS core LIBS PkgConfig::PCRE2)
mo_module(io DEPS core formats)
mo_module(tokenizer DEPS core io LIBS PkgConfig::PCRE2)
mo_module(model DEPS core formats io tokenizer)
mo_module(engine DEPS core formats io model tokenizer LIBS PkgConfig::LAPACKE PkgConfig::OPENBLAS)
mo_module(convert DEPS core formats io model tokenizer)
mo_module(quant DEPS core formats io model tokenizer engine convert LIBS PkgConfig::LAPACKE PkgConfig::OPENBLAS)
mo_module(eval DEPS core engine model tokenizer)
mo_module(report DEPS core io eval)
mo_module(diagnose DEPS core engine eval model quant tokenizer)
mo_module(config DEPS core LIBS yaml-cpp CLI11::CLI11)
mo_module(budget DEPS core formats io model config)
mo_module(inspect DEPS core formats engine io model quant tokenizer)
mo_module(serve DEPS core engine tokenizer budget inspect config io LIBS PkgConfig::HTTPLIB)
mo_module(bench DEPS core tokenizer LIBS PkgConfig::HTTPLIB)

# Every module, for the binary, the tests and the tools.
get_property(_mo_modules GLOBAL PROPERTY MO_MODULE_LIST)
add_library(mo_all INTERFACE)
foreach(m ${_mo_modules})
  target_link_libraries(mo_all INTERFACE mo_${m})
endforeach()

# The dependency list as text, for scripts/check-layers.py.
set(_mo_layers "")
foreach(m ${_mo_modules})
  get_property(d GLOBAL PROPERTY MO_MODULE_DEPS_${m})
  string(REPLACE ";" " " d "${d}")
  string(APPEND _mo_layers "${m}: ${d}\n")
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/module-layers.txt "${_mo_layers}")
