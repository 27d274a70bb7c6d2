"""What the stages run on, handed their work: processes, the pool, spill files, output files, templates."""
