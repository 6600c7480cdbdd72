# The broker's request parser and command path under libFuzzer (seeds in
# corpus/fuzz_resp_parser/). Included by tests/fuzz/CMakeLists.txt.
ringcast_add_fuzzer(NAME fuzz_resp_parser
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_resp_parser_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_resp_parser PRIVATE ${PROJECT_SOURCE_DIR}/src)
# Coverage feedback must come from the library, not just the harness: instrument
# ringcast_broker too (in the asan tree this adds coverage counters to the
# library the other tests use: a little slower, same behaviour).
target_compile_options(ringcast_broker PRIVATE -fsanitize=fuzzer-no-link,address,undefined)

# The WebSocket frame decoder (differential over input splits) and PopSub's JSON
# command parser (seeds in corpus/fuzz_ws_frames/ and corpus/fuzz_ws_json/).
ringcast_add_fuzzer(NAME fuzz_ws_frames
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_ws_frame_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_ws_frames PRIVATE ${PROJECT_SOURCE_DIR}/src)
ringcast_add_fuzzer(NAME fuzz_ws_json
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_ws_json_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_ws_json PRIVATE ${PROJECT_SOURCE_DIR}/src)

# The TLS accept path: arbitrary client bytes, then EOF, to a server-side
# TlsStream's handshake (seeds in corpus/fuzz_tls_accept/).
find_package(OpenSSL REQUIRED COMPONENTS SSL Crypto)
ringcast_add_fuzzer(NAME fuzz_tls_accept
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_tls_accept_fuzz.cpp
  LIBS ringcast::broker OpenSSL::SSL OpenSSL::Crypto)
target_include_directories(fuzz_tls_accept PRIVATE ${PROJECT_SOURCE_DIR}/src)

# Glob matching against Redis's recursive matcher (tests/broker/glob_oracle.hpp;
# seeds in corpus/fuzz_glob/).
ringcast_add_fuzzer(NAME fuzz_glob
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_glob_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_glob PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests/broker)

# The durable session resume path (issue 40): identities, client ids,
# publishes, acks, leaving and timers in any order, checking that no connection
# receives a channel its token may not read (seeds in corpus/fuzz_session_resume/).
ringcast_add_fuzzer(NAME fuzz_session_resume
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/broker_session_resume_fuzz.cpp
  LIBS ringcast::broker)
target_include_directories(fuzz_session_resume PRIVATE ${PROJECT_SOURCE_DIR}/src)
