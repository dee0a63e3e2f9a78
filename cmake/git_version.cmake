# Run at build time (cmake -P) so the binary names the commit it was actually built from.
# Rewrites the header only when its content changes, so nothing rebuilds needlessly.
# Only a repository whose top level is this source tree names its commit: an exported copy
# placed inside some other checkout must not take that checkout's commit.
execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY ${SRC}
  OUTPUT_VARIABLE toplevel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(rc EQUAL 0)
  get_filename_component(toplevel "${toplevel}" REALPATH)
  get_filename_component(src_real "${SRC}" REALPATH)
  if(toplevel STREQUAL src_real)
    execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
      OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  else()
    set(rc 1)
  endif()
endif()
if(NOT rc EQUAL 0 OR NOT commit)
  # A copy of the tree without .git (a source export) can name its commit in the environment.
  if(DEFINED ENV{TLBENCH_GIT_COMMIT})
    set(commit "$ENV{TLBENCH_GIT_COMMIT}")
  else()
    set(commit "unknown")
  endif()
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(dirty)
    set(commit "${commit}-dirty")
  endif()
endif()
set(content "#pragma once\n#define TLBENCH_VERSION \"${VERSION}\"\n#define TLBENCH_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
