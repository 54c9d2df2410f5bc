# The Apple driver (DESIGN.md §3): its Objective-C++ half is built only on macOS. Everywhere else
# ane_stub.cpp answers make_ane_driver with "not available on this platform", and CI compiles
# ane_driver.mm for syntax and types against GNUstep instead (tests/CMakeLists.txt,
# scripts/check_ane_driver_syntax.sh). The .cpp files of this folder are gathered by orion_layer.
# (OBJCXX itself is enabled in the top-level CMakeLists.txt, the scope every target links from.)
if(APPLE)
  target_sources(orion_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm PROPERTIES COMPILE_OPTIONS "-fobjc-arc")
  target_link_libraries(orion_runtime PUBLIC "-framework Foundation" "-framework CoreFoundation"
                                             "-framework IOSurface")
endif()
