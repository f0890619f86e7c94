# System packages only (scripts/install-deps.sh installs them); nothing is downloaded at build time.
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
# Needed by later modules (server, linear algebra for GPTQ, tokenizer regexes); checked now so a
# missing package shows up at configure time, not halfway through a later build.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(LAPACKE REQUIRED IMPORTED_TARGET lapacke)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)  # cblas_sgemm for calibration GEMMs, LAPACK for GPTQ
if(MO_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
