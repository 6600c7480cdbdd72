ringcast_add_fuzzer(NAME fuzz_ring_open SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_ring_open.cpp LIBS ringcast::ringcast)
ringcast_add_fuzzer(NAME fuzz_ring_read SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_ring_read.cpp LIBS ringcast::ringcast)
