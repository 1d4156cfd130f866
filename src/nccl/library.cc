// SPDX-License-Identifier: BSD-3-Clause
// libccl_nccl.so is made of the face and the layer libraries; this file only gives the target a source.
