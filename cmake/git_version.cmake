# Run at build time (cmake -P) so the binary names the commit it was actually built from.
# Rewrites the header only when its content changes, so nothing rebuilds needlessly.
# TLBENCH_GIT_COMMIT in the environment names the commit outright: for a copy of the tree whose
# .git is absent or does not describe it (a source export, a tree copied to a build host).
# Otherwise only a repository whose top level is this source tree names its commit: an
# exported copy placed inside some other checkout must not take that checkout's commit.
set(commit "")
if(DEFINED ENV{TLBENCH_GIT_COMMIT} AND NOT "$ENV{TLBENCH_GIT_COMMIT}" STREQUAL "")
  set(commit "$ENV{TLBENCH_GIT_COMMIT}")
else()
  execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY ${SRC}
    OUTPUT_VARIABLE toplevel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    get_filename_component(toplevel "${toplevel}" REALPATH)
    get_filename_component(src_real "${SRC}" REALPATH)
    if(toplevel STREQUAL src_real)
      execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
        OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
      if(rc EQUAL 0 AND commit)
        execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
          OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        if(dirty)
          set(commit "${commit}-dirty")
        endif()
      else()
        set(commit "")
      endif()
    endif()
  endif()
endif()
if(NOT commit)
  set(commit "unknown")
endif()
set(content "#pragma once\n#define TLBENCH_VERSION \"${VERSION}\"\n#define TLBENCH_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
