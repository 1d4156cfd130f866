# SPDX-License-Identifier: BSD-3-Clause
# Compiler settings shared by every target, and detection of the optional CUDA/NCCL parts.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_C_STANDARD 99)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-Wall> $<$<COMPILE_LANGUAGE:C,CXX>:-Wextra>
                    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-math-errno>)
if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  # -O2 with vectorisation of the element loops; keep asserts as in Release.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-O3>)
endif()

if(CCL_DEBUG_LINES_ONLY)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-g1>)  # after the build type's -g: the last one wins
endif()

if(CCL_SANITIZE STREQUAL "address")
  # -O1 (the last -O wins): ASan+UBSan instrumentation at -O3 takes twice as long to compile
  # (53 s against 24 s for codecs/quantizer_int.cc), the largest step of CI.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
                      $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  add_link_options(-fsanitize=address,undefined)
elseif(CCL_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT CCL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "CCL_SANITIZE must be '', address or thread")
endif()

# CUDA: AUTO turns it on when a CUDA compiler is found. Only sm_80 and sm_90 are built.
set(CCL_HAVE_CUDA OFF)
if(NOT CCL_ENABLE_CUDA STREQUAL "OFF" AND NOT CCL_SANITIZE)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know that nvcc 12+ takes -std=c++20; every CUDA target is C++20 too.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CCL_HAVE_CUDA ON)
  elseif(CCL_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CCL_ENABLE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

set(CCL_HAVE_NCCL OFF)
if(CCL_HAVE_CUDA AND NOT CCL_ENABLE_NCCL STREQUAL "OFF")
  find_path(CCL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(CCL_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(CCL_NCCL_INCLUDE_DIR AND CCL_NCCL_LIBRARY)
    set(CCL_HAVE_NCCL ON)
  elseif(CCL_ENABLE_NCCL STREQUAL "ON")
    message(FATAL_ERROR "CCL_ENABLE_NCCL=ON but NCCL was not found")
  endif()
endif()

if(CCL_ENABLE_UCX)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
endif()
find_package(Threads REQUIRED)
# Ranks in separate processes need a transport between processes (UCX); without one, only
# the in-process transport exists and the tests that start ranks as processes are left out.
set(CCL_HAVE_PROCESS_TRANSPORT ${CCL_ENABLE_UCX})

message(STATUS "ccl: UCX=${CCL_ENABLE_UCX} CUDA=${CCL_HAVE_CUDA} NCCL=${CCL_HAVE_NCCL} sanitize='${CCL_SANITIZE}'")

# Each src/ folder is one static library. A layer links only the layers below it, in the
# order of DESIGN.md section 1; tests/check_layers.sh checks that includes agree.
function(ccl_layer name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
                                            $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
  # The layer's name for CCL_DEBUG_SUBSYS: ccl_transport -> "transport", ccl_nccl_face -> "nccl".
  string(REGEX REPLACE "^ccl_([a-z]+).*$" "\\1" _layer ${name})
  target_compile_definitions(${name} PRIVATE CCL_BUILDING_LIBRARY CCL_LOG_LAYER="${_layer}")
endfunction()

# Adds every subfolder of the current source folder that has a CMakeLists.txt, so that
# tests/, perf/ and examples/ grow by adding folders, not by editing a shared list.
function(ccl_add_subdirs)
  file(GLOB _dirs LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(_dir IN LISTS _dirs)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${_dir}/CMakeLists.txt)
      add_subdirectory(${_dir})
    endif()
  endforeach()
endfunction()
