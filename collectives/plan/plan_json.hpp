// Plans as JSON (DESIGN.md, "Plans"), so an algorithm can live in a file. The format:
// {
//   "format": "tessera-plan", "version": 1,
//   "name": "allreduce.ring.n2", "collective": "allreduce", "algorithm": "ring",
//   "nranks": 2, "root": 0, "chunksPerSegment": 2, "zeroCopy": false, "canonicalOrder": false,
//   "ranks": [
//     { "scratchSegments": 1,
//       "credits": [ {"peer": 1, "channel": 1, "initial": 1} ],
//       "workers": [
//         { "ops": [
//             {"op": "put", "src": {"buffer": "input", "index": 1},
//                           "dst": {"rank": 1, "buffer": "scratch", "index": 0, "count": 1}},
//             {"op": "signal", "peer": 1, "channel": 0},
//             {"op": "wait", "peer": 1, "channel": 0},
//             {"op": "reduce", "srcs": [{"buffer": "input", "index": 0},
//                                       {"buffer": "scratch", "index": 0}],
//                              "dst": {"buffer": "output", "index": 0}},
//             ...
//         ] } ] }, ... ] }
// A ref's "rank" is omitted for local refs and "count" defaults to 1. put/get/copy take "src",
// reduce/reduceSend take "srcs"; put and reduceSend may take "dst2". Optional fields take the
// defaults of plan.hpp. Unknown fields are errors (a typo must not be silently ignored).
//
// Reading never trusts the file: wrong types, missing fields, unknown names, numbers out of
// range, more than the plan.hpp limits, and a document deeper or larger than reasonable all give
// tsrInvalidArgument with the JSON path of the offending field, e.g.
// "plan.json: ranks[1].workers[0].ops[3].dst.index: expected an integer, found \"x\"". Reading
// also runs checkPlanShape; it does NOT run the verifier (tessera_plan verify and the executor's
// plan loading do).
#pragma once

#include <string>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera {

// Whether this build has a JSON library (nlohmann-json); without it every function below returns
// tsrInvalidUsage saying so.
bool planJsonAvailable();

// `source` names the text in error sentences (a file name, or "plan").
Result planFromJson(const std::string& text, const std::string& source, Plan* out);
// Pretty-printed (indent 2) when `pretty`, one line otherwise.
Result planToJson(const Plan& plan, std::string* out, bool pretty = true);

Result readPlanFile(const std::string& path, Plan* out);
// Writes atomically (a temporary file renamed over `path`), so a failure never leaves half a file.
Result writePlanFile(const Plan& plan, const std::string& path);

// A readable per-rank listing (tessera_plan show): header, then per rank and worker one op per
// line with its index.
std::string showPlan(const Plan& plan);

}  // namespace tessera
