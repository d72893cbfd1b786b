"""Interactive terminal loops: step, predict, present and watch. They read keys and print renderables."""
