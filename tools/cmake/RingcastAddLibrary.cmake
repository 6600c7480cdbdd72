# ringcast_add_library(NAME <part> SOURCES <files...>
#                      [PUBLIC_LIBS <targets...>] [PRIVATE_LIBS <targets...>]
#                      [EXPORT <export set>])
# One ringcast library beside the ring: target ringcast_<part>, alias and export
# name ringcast::<part>, public headers from include/ (installed under the
# include dir), private headers from src/, C++20, the private warnings target,
# and Asio without its deprecated names. With EXPORT, the library is installed
# into that export set.
function(ringcast_add_library)
  cmake_parse_arguments(L "" "NAME;EXPORT" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  set(target ringcast_${L_NAME})
  add_library(${target} ${L_SOURCES})
  add_library(ringcast::${L_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${L_NAME})
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${PROJECT_SOURCE_DIR}/src)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target}
    PUBLIC ${L_PUBLIC_LIBS}
    PRIVATE ${L_PRIVATE_LIBS} ringcast_warnings)
  # Asio without its deprecated names.
  target_compile_definitions(${target} PRIVATE BOOST_ASIO_NO_DEPRECATED)
  if(L_EXPORT)
    install(TARGETS ${target} EXPORT ${L_EXPORT}
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endfunction()
