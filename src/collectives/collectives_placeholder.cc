// Replaced by plans and executors.
