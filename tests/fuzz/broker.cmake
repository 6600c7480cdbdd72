# The broker's request parser and command path under libFuzzer (seeds in
# corpus/fuzz_resp_parser/). Included by tests/fuzz/CMakeLists.txt.
ringcast_add_fuzzer(NAME fuzz_resp_parser
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_resp_parser_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_resp_parser PRIVATE ${PROJECT_SOURCE_DIR}/src)
