# Which Objective-C++ the Apple driver (ane_driver.mm) is built with. Included from the top-level
# CMakeLists.txt, the scope every target links from (enable_language must be called there).
#   macOS   Apple's clang and frameworks, ARC (ane.cmake).
#   Linux   ORION_ANE_FAKE: the same .mm built with clang++ against GNUstep's Foundation on GCC's
#           Objective-C runtime (-fobjc-runtime=gcc; that runtime has no ARC, so reference counting
#           is manual) into a loadable module (ane.cmake; never into orion, which links no GNUstep),
#           so the real driver code runs in ctest against a fake of the private framework
#           (tests/ane_driver/fake/). On by default when clang++ and GNUstep are installed
#           (scripts/setup.sh); without them the driver module is not built and the ane_driver tests
#           skip, saying why.
if(APPLE)
  enable_language(OBJCXX)
  return()
endif()

find_program(ORION_CLANGXX NAMES clang++ clang++-14)
find_program(ORION_GNUSTEP_CONFIG gnustep-config)
execute_process(COMMAND gcc -print-file-name=include/objc/objc.h OUTPUT_VARIABLE orion_objc_h
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(orion_ane_fake_default OFF)
if(ORION_CLANGXX AND ORION_GNUSTEP_CONFIG AND EXISTS "${orion_objc_h}" AND NOT ORION_SANITIZE AND NOT ORION_FUZZ)
  set(orion_ane_fake_default ON)
endif()
option(ORION_ANE_FAKE "Build the Apple driver on Linux against the test fake of its framework (clang++, GNUstep)"
       ${orion_ane_fake_default})
if(NOT ORION_ANE_FAKE)
  message(STATUS "ORION_ANE_FAKE off (needs clang++ and libgnustep-base-dev): the ane_driver tests skip")
  return()
endif()
if(NOT ORION_CLANGXX OR NOT ORION_GNUSTEP_CONFIG OR NOT EXISTS "${orion_objc_h}")
  message(FATAL_ERROR "ORION_ANE_FAKE needs clang++, gnustep-config and GCC's objc/objc.h (scripts/setup.sh)")
endif()

if(NOT CMAKE_OBJCXX_COMPILER)
  set(CMAKE_OBJCXX_COMPILER ${ORION_CLANGXX})
endif()
enable_language(OBJCXX)
set(CMAKE_OBJCXX_STANDARD 20)

# GNUstep's defines and include folders, without its build-only flags (-MMD, -g, -O2, -I.), plus
# the folder of GCC's libobjc headers, which GNUstep's headers include.
execute_process(COMMAND ${ORION_GNUSTEP_CONFIG} --objc-flags OUTPUT_VARIABLE gs_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(gs_flags UNIX_COMMAND "${gs_flags}")
get_filename_component(orion_objc_inc "${orion_objc_h}" DIRECTORY)
get_filename_component(orion_objc_inc "${orion_objc_inc}" DIRECTORY)
set(ORION_ANE_OBJC_FLAGS -fobjc-runtime=gcc -fobjc-exceptions -Wno-deprecated-objc-isa-usage)
foreach(f ${gs_flags})
  if(f MATCHES "^-I/" )
    string(SUBSTRING "${f}" 2 -1 dir)
    list(APPEND ORION_ANE_OBJC_FLAGS -isystem${dir})  # one word: options are de-duplicated
  elseif(f MATCHES "^-D" OR f MATCHES "^-fconstant-string-class=")
    list(APPEND ORION_ANE_OBJC_FLAGS ${f})
  endif()
endforeach()
list(APPEND ORION_ANE_OBJC_FLAGS -isystem${orion_objc_inc})
set(ORION_ANE_OBJC_LIBS gnustep-base objc ${CMAKE_DL_LIBS})
message(STATUS "ORION_ANE_FAKE on: the Apple driver is built with ${CMAKE_OBJCXX_COMPILER} against GNUstep")
