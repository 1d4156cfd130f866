// SPDX-License-Identifier: BSD-3-Clause
// libccl.so is made of the layer libraries; this file only gives the target a source.
