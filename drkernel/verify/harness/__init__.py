"""The process under test: the runner loop the reference's and the candidate's children run, and its evidence."""
