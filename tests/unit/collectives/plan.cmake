# Plan IR, JSON and verifier tests (collectives/plan), and the tessera_plan CLI.

foreach(t test_plan_shape test_plan_json test_verifier)
  tessera_unit_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.cpp)
endforeach()

# The verifier on every family's plans at 64 ranks (needs the generators, so the whole library).
tessera_unit_test(test_verifier_scale SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verifier_scale.cpp)

if(NOT TESSERA_HAVE_JSON)
  return()  # the CLI reads and writes plan files only with JSON support
endif()

# tessera_plan on plan files: the output says ok or names the failure, and the exit code is 0, 1
# (verification failed) or 2 (usage). `sh -c` appends the exit code for the regexes to match.
set(_plans ${CMAKE_CURRENT_LIST_DIR}/plans)
function(tessera_plan_cli_test name regex)
  add_test(NAME tessera_plan.${name}
           COMMAND sh -c "\"$<TARGET_FILE:tessera_plan>\" \"$@\" 2>&1; echo \"exit=$?\"" sh ${ARGN})
  set_tests_properties(tessera_plan.${name} PROPERTIES LABELS unit TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
tessera_plan_cli_test(verify_good "allreduce_ring_n3.json: ok \\(allreduce ring, 3 ranks.*exit=0"
                      verify ${_plans}/allreduce_ring_n3.json)
tessera_plan_cli_test(verify_deadlock
  "broken_missing_signal.json: FAIL: deadlock: no worker can proceed: rank 1 worker 0 op 15.*exit=1"
  verify ${_plans}/broken_missing_signal.json)
tessera_plan_cli_test(verify_race
  "FAIL: race: rank 0 worker 0 op 0 \\(put input\\[0\\] -> rank 1 scratch\\[0\\]\\) in iteration 1 writes.*exit=1"
  verify ${_plans}/allreduce_ring_n3.json ${_plans}/broken_scratch_race.json)
tessera_plan_cli_test(verify_missing_file "missing.json: FAIL: .*exit=1"
                      verify ${_plans}/missing.json)
tessera_plan_cli_test(show "rank 2: scratch 2 segments.*worker 0 \\(24 ops\\).*exit=0"
                      show ${_plans}/allreduce_ring_n3.json)
tessera_plan_cli_test(usage "unknown command \"frobnicate\".*exit=2" frobnicate)
tessera_plan_cli_test(usage_generate "generate needs --coll, --algo and --nranks.*exit=2"
                      generate --coll allreduce)
# Needs the ring generator (collectives/algorithms): generate, write, read back, verify.
add_test(NAME tessera_plan.generate_ring_allreduce_then_verify
         COMMAND sh -c "\"$1\" generate --coll allreduce --algo ring --nranks 5 -o \"$2\" && \"$1\" verify \"$2\""
                 sh $<TARGET_FILE:tessera_plan> ${CMAKE_CURRENT_BINARY_DIR}/tessera_plan_ring_n5.json)
set_tests_properties(tessera_plan.generate_ring_allreduce_then_verify PROPERTIES LABELS unit
  TIMEOUT 60 PASS_REGULAR_EXPRESSION "tessera_plan_ring_n5.json: ok \\(allreduce ring, 5 ranks")
