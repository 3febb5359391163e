"""The C backend's whole-graph programs: program.py schedules a function into tables,
program.c (with output_pool.c and streaming.c) runs them as one C call."""
