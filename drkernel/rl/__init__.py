"""The DR.Kernel RL mathematics: rewards, TRLOO, rejection (MRS/PRS), filtering, loss. Pure torch."""
