# The Apple driver (DESIGN.md §3). On macOS its Objective-C++ half, ane_driver.mm, is built into
# orion_runtime. On Linux with ORION_ANE_FAKE (ane_toolchain.cmake) the same file is built into a
# loadable module of its own, liborion_ane_driver.so, linking GNUstep — never into orion, so a Linux
# build of orion depends on no Objective-C runtime. ane_module.cpp opens that module when
# ORION_ANE_FRAMEWORK names the test fake of the private framework and ORION_ANE_DRIVER_MODULE the
# module (tests/ane_driver/ set both); otherwise make_ane_driver answers "not available on this
# platform". CI also compiles ane_driver.mm for syntax and types under ARC against GNUstep
# (scripts/check_ane_driver_syntax.sh). The .cpp files of this folder are gathered by orion_layer.
if(APPLE)
  target_sources(orion_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm PROPERTIES COMPILE_OPTIONS "-fobjc-arc")
  target_link_libraries(orion_runtime PUBLIC "-framework Foundation" "-framework CoreFoundation"
                                             "-framework IOSurface")
elseif(ORION_ANE_FAKE)
  add_library(orion_ane_driver MODULE ${CMAKE_CURRENT_LIST_DIR}/ane_driver.mm)
  target_compile_options(orion_ane_driver PRIVATE ${ORION_ANE_OBJC_FLAGS})
  # Its own copy of the few runtime functions it calls (surface_spec, …), bound inside itself.
  target_link_libraries(orion_ane_driver PRIVATE orion_runtime ${ORION_ANE_OBJC_LIBS})
  target_link_options(orion_ane_driver PRIVATE -Wl,-Bsymbolic)
endif()
