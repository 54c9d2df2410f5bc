# The Apple driver (DESIGN.md §3): its Objective-C++ half is built on macOS, and on Linux with
# ORION_ANE_FAKE (ane_toolchain.cmake), where it runs against the test fake of the private framework
# named by ORION_ANE_FRAMEWORK (tests/ane_driver/). Everywhere else ane_stub.cpp answers
# make_ane_driver with "not available on this platform". CI also compiles ane_driver.mm for syntax
# and types under ARC against GNUstep (scripts/check_ane_driver_syntax.sh). The .cpp files of this
# folder are gathered by orion_layer.
if(APPLE)
  target_sources(orion_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm PROPERTIES COMPILE_OPTIONS "-fobjc-arc")
  target_link_libraries(orion_runtime PUBLIC "-framework Foundation" "-framework CoreFoundation"
                                             "-framework IOSurface")
elseif(ORION_ANE_FAKE)
  target_sources(orion_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm PROPERTIES COMPILE_OPTIONS
                              "${ORION_ANE_OBJC_FLAGS}")
  target_compile_definitions(orion_runtime PRIVATE ORION_ANE_DRIVER_BUILT=1)  # ane_stub.cpp steps aside
  target_link_libraries(orion_runtime PUBLIC ${ORION_ANE_OBJC_LIBS})
endif()
