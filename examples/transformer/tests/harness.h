// SPDX-License-Identifier: BSD-3-Clause
// What the trainer's multi-rank tests share: a folder of the test process's own (ctest runs
// a binary's tests as concurrent processes), a small text with structure to learn, and a run
// of the trainer on ranks as threads.
#pragma once

#include <string>
#include <vector>

#include "train.h"

namespace gpt::harness {

// Created on first use, removed when the process ends; ends with '/'.
const std::string& tempDir();

// A text of about 100 KB, written once per process into tempDir().
const std::string& corpusPath();

// Runs `o` on n thread ranks; returns rank 0's result.
TrainResult runOn(int n, const TrainOptions& o);

// Largest |a - b| relative to the largest |a|.
double relativeDifference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace gpt::harness
