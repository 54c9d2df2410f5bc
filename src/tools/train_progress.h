// How `orion train` and `orion lora train` show a run's progress: a callback for the training
// loop's events (train/loop/progress.h) that prints the progress lines on stderr.
//   train style:  "step  40/200 | loss 3.1234 | val 3.2 | lr 2.00e-03 | gnorm 0.52 | 12.3k tok/s | 80 ms/step | ETA 0:13"
//   lora style:   "lora: step 40/100 | loss 3.1234 | lr 1.00e-03 | gnorm 0.052 | 12345 tok/s"
// Setup notes are printed as they come; the start and end summaries in the command's words.
#pragma once
#include "train/loop/progress.h"

namespace orion::tools {

enum class ProgressStyle { Train, Lora };

train::ProgressCallback progress_printer(ProgressStyle style);

}  // namespace orion::tools
