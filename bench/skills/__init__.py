"""Do learned skills help? Gold-action coverage of skills learned from tau-bench, and whether outcomes
send harmful skills to review and lift helpful ones."""
